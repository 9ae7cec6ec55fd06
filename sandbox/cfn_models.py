"""moto's CloudFormation reads its resource models once and caches the lists: a stand-in model
defined later (a ``CloudFormationModel`` subclass: ``batch_cfn``, ``registry_cfn``) is seen only
after :func:`see_new_models` clears those caches."""

from __future__ import annotations


def see_new_models() -> None:
    """Make moto's CloudFormation see every CloudFormationModel subclass defined so far."""
    from moto.cloudformation import parsing

    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
