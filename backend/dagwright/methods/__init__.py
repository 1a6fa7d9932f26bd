"""The seed papers' methods as pure functions (prompts, parsing, votes, table operations);
their blocks are in blocks/chain_of_table.py and blocks/mac_sql.py, their flows in
flows/methods/."""
