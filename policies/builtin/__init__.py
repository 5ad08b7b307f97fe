"""Built-in pruning policies; look them up by name with :func:`policies.get_policy`."""
