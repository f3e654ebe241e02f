"""Training configs of other tools read as clustersim scenarios: torchtitan job TOML, DeepSpeed JSON, Megatron-LM
and NeMo argument lists (`clustersim import`). Each module takes a file's text and returns an ImportedJob; the
CLI reads the file and writes the scenario."""
