import { describe, expect, it } from "vitest";
import { ALL_GROUPS } from "./groups.ts";
import { EDITORS_GROUP } from "./reporting.ts";
import { DATA_ROOT_GROUP, SEARCH_ROLES, STORAGE_WRITER_GROUP } from "./search.ts";
import { ADMIN_GROUP } from "../actors/projects/handlers.ts";
import { PUBLISHERS_GROUP } from "../actors/notifications/actor.ts";
import { READERS, WRITERS } from "../actors/twins/handlers.ts";
import { OPERATORS_GROUP } from "./system.ts";

describe("groups", () => {
  it("groups - the list holds every group a capability checks", () => {
    for (const group of [
      EDITORS_GROUP,
      DATA_ROOT_GROUP,
      STORAGE_WRITER_GROUP,
      ...SEARCH_ROLES,
      ADMIN_GROUP,
      PUBLISHERS_GROUP,
      READERS,
      WRITERS,
      OPERATORS_GROUP,
    ])
      expect(ALL_GROUPS).toContain(group);
  });
});
