"""AutoTQA: agents (published flows) taking turns under a scheduler to answer questions over
tables. See docs/autotqa.md. Light on purpose: import the submodules you need."""
