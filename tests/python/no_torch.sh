#!/usr/bin/env bash
# Stands in for the interpreter when CMake found no python3 that can import torch.
echo "no python3 with torch: install python3-torch (scripts/setup does), then reconfigure" >&2
exit 1
