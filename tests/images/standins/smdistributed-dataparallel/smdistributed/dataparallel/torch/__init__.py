"""smddp's PyTorch bindings (stand-in; see ``smdistributed.dataparallel``)."""
