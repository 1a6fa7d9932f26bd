"""Block and port-type declarations, and the registry that collects them."""

from dagwright.registry.block import (
    CATEGORIES,
    DEFAULT_OUTPUT,
    BlockSpec,
    Category,
    NoConfig,
    PortSpec,
    Route,
    block,
    spec_of,
)
from dagwright.registry.context import ModelCall, ModelUsage, NodeContext, Usage
from dagwright.registry.registry import Registry
from dagwright.registry.services import (
    APPS,
    AUTOTQA,
    EXAMPLES,
    HUMAN,
    INTERFACES,
    MODELS,
    SECRETS,
    TABLES,
    BlockServices,
    MissingServiceError,
    Service,
)
from dagwright.registry.types import Compat, checker_for, compatibility, type_name

__all__ = [
    "APPS",
    "AUTOTQA",
    "CATEGORIES",
    "DEFAULT_OUTPUT",
    "EXAMPLES",
    "HUMAN",
    "INTERFACES",
    "MODELS",
    "SECRETS",
    "TABLES",
    "BlockServices",
    "BlockSpec",
    "Category",
    "Compat",
    "MissingServiceError",
    "ModelCall",
    "ModelUsage",
    "NoConfig",
    "NodeContext",
    "PortSpec",
    "Registry",
    "Route",
    "Service",
    "Usage",
    "block",
    "checker_for",
    "compatibility",
    "spec_of",
    "type_name",
]
