/** The devices of docs/nats/accounts.example.conf: the test checks the file against the generator for these. */
import type { DeviceAccountInput } from "../../platform/nats-users.ts";

export const EXAMPLE_INTERNAL = { user: "derrick", password: "derrick-password-change-me" };

export const EXAMPLE_DEVICES: DeviceAccountInput[] = [
  {
    user: "AppA",
    password: "AppA-password-change-me",
    twin: { organization: "acme", environment: "prod", twinId: "dev-a" },
    subscribe: ["slbapps.AppA.DataIn", "slbapps.AppA.RequestIn"],
    publish: ["slbapps.AppA.DataOut"],
  },
  {
    user: "AppB",
    password: "AppB-password-change-me",
    twin: { organization: "acme", environment: "prod", twinId: "dev-b" },
    subscribe: ["slbapps.AppB.DataIn"],
    publish: ["slbapps.AppB.DataOut"],
  },
];
