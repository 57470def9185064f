"""YuniKorn queue configuration: YAML → strict model → per-rule validation → checksum."""

from events.quantities import parse_quantity
from scheduler.config.check import check_config
from scheduler.config.errors import ConfigError
from scheduler.config.load import DEFAULT_CONFIG_YAML, default_config, load_config
from scheduler.config.specs import PartitionSpec, QueueSpec, SchedulerConfig, find_queue

__all__ = [
    "DEFAULT_CONFIG_YAML",
    "ConfigError",
    "PartitionSpec",
    "QueueSpec",
    "SchedulerConfig",
    "check_config",
    "default_config",
    "find_queue",
    "load_config",
    "parse_quantity",
]
