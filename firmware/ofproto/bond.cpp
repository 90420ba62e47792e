// STUB: the bond logic lands with the bond work (bond.h).
#include "ofproto/bond.h"
