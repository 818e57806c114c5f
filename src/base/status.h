// Status and Result are part of the public API; this is where library code includes them from.
#pragma once
#include "lfmvox/status.h"
