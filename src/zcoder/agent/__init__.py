"""The agent: model clients, the turn loop and its guards."""
