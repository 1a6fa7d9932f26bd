"""The data layer: connectors to data sources (the paper's five calls), the catalog of named
sources, the read-only SQL check and the federated query engine (DuckDB fed Arrow).

Import from the modules (`dagwright.data.catalog`, `.engine`, `.connector`, ...): this
package imports nothing, so a process that needs one light module of it (the server's
start-up needs `isolation`) does not load DuckDB, Arrow and pandas with it.
"""
