"""Data-Copilot (Zhang et al., "Data-Copilot: Bridging Billions of Data and Humans with
Autonomous Workflow"): interfaces (interface.py), their design-test-merge loop (design.py),
the library per data source (library.py) and the workflow plan in the paper's JSON form
(plan.py). Blocks in blocks/data_copilot.py, flows in flows/methods/data_copilot/."""
