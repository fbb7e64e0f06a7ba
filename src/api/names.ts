/**
 * The names Kubernetes accepts, as the apiserver validates them (RFC 1123): a namespace is a
 * DNS label, an object of our kinds a DNS subdomain.
 */

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether `text` is a valid namespace name (RFC 1123 label, at most 63 characters). */
export const isNamespaceName = (text: string) => text.length <= 63 && DNS_LABEL.test(text);

/** Whether `text` is a valid object name of our kinds (RFC 1123 subdomain, at most 253 characters). */
export const isObjectName = (text: string) => text.length <= 253 && DNS_SUBDOMAIN.test(text);
