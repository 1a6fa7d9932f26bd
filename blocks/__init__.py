"""The built-in block library, one module per category. Every module here is loaded by the
registry; a new module dropped in this folder needs no change elsewhere."""
