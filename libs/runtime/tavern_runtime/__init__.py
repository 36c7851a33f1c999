"""Shared plumbing of AgentTavern services: settings, logging, errors, connections, servers."""
