"""AgentTavern ledger service."""
