"""Chain-of-Table (Wang et al., ICLR 2024) as its official implementation
(google-research/chain-of-table) runs it: the operation state machine, the prompts, the
parsing and votes of GenerateArgs, and the operations on the table, as pure functions over
JSON values so that blocks and tests share them.

`demos.json` holds the official demonstrations (utils/chain.py, operations/*.py, Apache-2.0;
the f_row/f_col demos from third_party/select_column_row_prompts, MIT, Alibaba Research),
split into intro, demos and outro so a flow can use fewer demos than the official prompt."""
