export { startNotificationsActor, startDispatcherActor, startDelivererActor, PUBLISHERS_GROUP } from "./actor.ts";
