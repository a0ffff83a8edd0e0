"""Typed results of the OpenViking HTTP API."""
