"""The types the engine (``nas``) and the model families (``supernets``) share: ``ArchConfig``,
``SearchSpace``, ``BlockSignature``, the ``Family`` interface, ``NasError`` and typed YAML.

Nothing here imports another part of the project, so both sides import it without cycles.
"""
