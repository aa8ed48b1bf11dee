#!/bin/sh
# An rsh agent for mpirun (--mca plm_rsh_agent THIS) that reaches the test's "hosts" (network
# namespaces, tests/distributed/two_hosts.py) as ssh reaches real ones: `THIS HOST COMMAND...` runs
# COMMAND with /bin/sh inside the namespace that holds the address HOST. Open MPI starts its daemon
# (prted) on each other host this way; the daemon then starts that host's ranks.
host=$1
shift
for ns in $(ip netns list | cut -d' ' -f1); do
    if ip -n "$ns" -o -4 addr show | grep -q " inet $host/"; then
        exec ip netns exec "$ns" /bin/sh -c "$*"
    fi
done
echo "netns_rsh_agent: no network namespace holds the address $host" >&2
exit 255
