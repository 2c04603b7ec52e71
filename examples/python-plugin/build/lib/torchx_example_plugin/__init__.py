"""An example TorchX plugin package: one plugin per entry-point group."""
