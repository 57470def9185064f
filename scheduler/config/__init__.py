"""YuniKorn queue configuration: YAML → strict model → per-rule validation → checksum."""
