// STUB: the LACP logic lands with the LACP work (lacp.h).
#include "ofproto/lacp.h"
