import type { Definition } from '../definition';

/**
 * acta's own recurring definitions (docs/DESIGN.md, "Workflows": sys.retention, sys.alerts and
 * sys.outbox are recurring slots like any schedule): every worker registers them beside the user's
 * definitions, each with its `schedule`, so whichever worker is free runs each fire.
 */
export const systemDefinitions: readonly Definition[] = [];
