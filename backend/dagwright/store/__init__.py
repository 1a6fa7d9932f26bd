"""Persistence: SQLModel tables, the database engine, and migrations run at start-up."""
