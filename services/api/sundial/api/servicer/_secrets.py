"""JobService's secret handlers (secret.proto): values go in, never out."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.servicer._base import ServicerBase
from sundial.core.errors import InvalidArgument
from sundial.v1 import secret_pb2 as pb


class SecretHandlers(ServicerBase):
    """CreateSecret, UpdateSecret, ListSecrets, DeleteSecret."""

    async def CreateSecret(
        self, request: pb.CreateSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateSecretResponse:
        if not request.HasField("secret"):
            raise InvalidArgument("secret", "is required")
        secret = request.secret
        created = await self._secrets.create(
            current_tenant(), secret.name, secret.value, secret.description
        )
        return pb.CreateSecretResponse(secret=convert.secret_out(created))

    async def UpdateSecret(
        self, request: pb.UpdateSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateSecretResponse:
        if not request.HasField("secret"):
            raise InvalidArgument("secret", "is required")
        secret = request.secret
        updated = await self._secrets.update(
            current_tenant(),
            secret.name,
            secret.value,
            secret.description,
            expected_version=request.expected_version,
        )
        return pb.UpdateSecretResponse(secret=convert.secret_out(updated))

    async def ListSecrets(
        self, request: pb.ListSecretsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSecretsResponse:
        page = await self._secrets.list(
            current_tenant(), page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListSecretsResponse(
            secrets=[convert.secret_out(s) for s in page.items],
            next_page_token=page.next_page_token,
        )

    async def DeleteSecret(
        self, request: pb.DeleteSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteSecretResponse:
        await self._secrets.delete(
            current_tenant(), request.name, expected_version=request.expected_version
        )
        return pb.DeleteSecretResponse()
