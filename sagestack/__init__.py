"""sagestack: declarative deep-learning infrastructure on Amazon SageMaker."""

__version__ = "0.1.0"
