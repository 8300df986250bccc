"""The graph toolkit the family modules (planner/archs/) build with: llm_graph_context's inputs,
attention, FFN and recurrent-state pieces (context.py) and the dense families' shared blocks."""
