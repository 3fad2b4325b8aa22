"""Test helpers shared by unit, integration, e2e and fault tests."""
