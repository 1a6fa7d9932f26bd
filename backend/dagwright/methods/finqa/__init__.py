"""FinQA reflection (Fatemi and Hu 2024) over FinQA (Chen et al. 2021): the program language
and its execution as the official evaluator runs them (program.py). The agents are `chat`
nodes of flows/methods/finqa_reflection/; blocks/finqa.py lays out the context and executes
the expert's program."""
