"""Server runtime every service starts with: gRPC server, health, reflection, shutdown."""
