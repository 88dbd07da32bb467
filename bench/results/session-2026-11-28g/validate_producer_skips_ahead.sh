#!/usr/bin/env bash
# As validate_producer_skips.sh with the skipping warpgroups read a step ahead by the producer
# (c: .carry/s29c, the pending PV finished at a skip; d: .carry/s29d, held across skips).
exec bash "$(dirname "$0")/validate_producer_skips.sh" s29c s29d
