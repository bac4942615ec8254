"""Files `sagestack init` writes into a new project (package data)."""
