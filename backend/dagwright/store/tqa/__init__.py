"""AutoTQA's records, one repository per aggregate: conversations (with their turns), TQA
datasets (profiles, with their SOP versions), hints, tools. They store and check what a
record may hold; what the records mean to the agents is dagwright.tqa's."""
