"""The artifact mesh: a local mesh built from a synthesized cloud assembly (``cdk.out``), never from the manifest."""
