#!/bin/sh
# An rsh agent for mpirun (--mca plm_rsh_agent THIS) that reaches the test's "hosts" (network
# namespaces, tests/distributed/two_hosts.py) as ssh reaches real ones: `THIS HOST COMMAND...` runs
# COMMAND with /bin/sh inside the namespace that holds the address HOST. Open MPI starts its daemon
# (prted) on each other host this way; the daemon then starts that host's ranks. Each host gets a
# /dev/shm of its own, as real hosts have (ip netns exec gives COMMAND its own mount namespace): with
# one shared /dev/shm and one hostname, Open MPI's shared-memory segments of the two hosts' local
# ranks have the same names (sm_segment.HOST.UID.JOB.LOCALRANK), and a rank crashed in the sm btl.
# When COMMAND ends while HOST's link is down, the agent stays until the link is back: an ssh client
# never hears that a command ended on a host whose link is cut, so mpirun must notice the lost
# daemon itself (over its own connection), not from its agent's exit. (It also ends when that
# namespace is gone.)
host=$1
shift
for ns in $(ip netns list | cut -d' ' -f1); do
    if ip -n "$ns" -o -4 addr show | grep -q " inet $host/"; then
        ip netns exec "$ns" /bin/sh -c "mount -t tmpfs -o mode=1777 fct-shm /dev/shm && $*"
        status=$?
        while links=$(ip -n "$ns" -o link show up) && ! echo "$links" | grep -qv ": lo:"; do
            sleep 1
        done
        exit $status
    fi
done
echo "netns_rsh_agent: no network namespace holds the address $host" >&2
exit 255
