"""smddp's DistributedDataParallel (stand-in; see ``smdistributed.dataparallel``)."""
