"""The platform's PyTorch trainer: ``trainer.train``, ``trainer.healthcheck``, ``trainer.bench``."""

__version__ = "0.1.0"
