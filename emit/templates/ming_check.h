// C-simulation port check (MING_CHECK_PORTS).
#pragma once
