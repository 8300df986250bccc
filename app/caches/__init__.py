"""What vramchat keeps between runs so that planning is quick (the cache folder): plans per file and device
fingerprint (plans.py, for the model lists), GGUF headers and anatomies (headers.py), the compute buffer
sizes the planner's graph replay measured (compute.py), and the atomic writes and bounded reads they all
use (files.py). Each is a cache: anything it cannot read is planned again."""
