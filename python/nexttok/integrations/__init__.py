"""nexttok inside inference engines and libraries, one small module each:

- nexttok.integrations.transformers: a grammar-bitmask LogitsProcessor and a decode
  loop that draws with nexttok.sample from a GenerationConfig;
- nexttok.integrations.sglang: a sampler backend for SGLang (--sampling-backend nexttok);
- nexttok.integrations.vllm: a vLLM general plugin that routes vLLM's FlashInfer
  sampling call to nexttok.

Importing one of them imports its library; the README's "Use it from ..." section
shows each in use.
"""
