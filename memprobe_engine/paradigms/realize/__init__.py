"""The realizer (``memprobe generate episodes``): latent paradigm specs written into episodes, one short
LLM-written session at a time, each held to the paper's rule checks."""
