"""Example applications shipped with TorchX (run them with the builtin components)."""
