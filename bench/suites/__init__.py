"""One module (or small package) per ``ragtime bench X``, each with its ``register`` and ``run``."""
