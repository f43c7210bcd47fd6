"""Where weights come from: the bundled GGUF (converted once and cached), Hugging Face ids and folders,
tiny random models for tests; and the key-map table that pours a checkpoint into our Transformer."""
