import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { WorkQueue, WorkQueueMetricsHooks } from './workqueue.ts';

/** controller-runtime's reconcile-time buckets. */
const reconcileBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5,
  1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
/** client-go's workqueue buckets: ExponentialBuckets(10e-9, 10, 10). */
const queueBuckets = Array.from({ length: 10 }, (_, i) => 1e-8 * 10 ** i);

export type ReconcileResultLabel = 'success' | 'error' | 'requeue' | 'requeue_after';

/**
 * The runtime's metrics, under controller-runtime's and client-go's names, on the Registry passed
 * in. One instance per Registry (metric names are unique per registry).
 */
export class RuntimeMetrics {
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly terminalReconcileErrors: Counter<'controller'>;
  /** Not in controller-runtime: the error class name as a label (our errors are classes). */
  readonly reconcileErrorsByReason: Counter<'controller' | 'reason'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly activeWorkers: Gauge<'controller'>;
  readonly maxConcurrentReconciles: Gauge<'controller'>;
  readonly leaderStatus: Gauge<'name'>;
  private readonly workQueues: WorkQueueMetrics;

  constructor(registry: Registry) {
    const registers = [registry];
    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.terminalReconcileErrors = new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.reconcileErrorsByReason = new Counter({
      name: 'controller_runtime_reconcile_errors_by_reason_total',
      help: 'Total number of reconciliation errors per controller and error class',
      labelNames: ['controller', 'reason'],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: reconcileBuckets,
      registers,
    });
    this.activeWorkers = new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    });
    this.maxConcurrentReconciles = new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers,
    });
    this.leaderStatus = new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.',
      labelNames: ['name'],
      registers,
    });
    this.workQueues = new WorkQueueMetrics(registers);
  }

  /** Hooks for a queue named `name` (the controller name, as in controller-runtime). */
  queueHooks(name: string): WorkQueueMetricsHooks {
    return this.workQueues.hooks(name);
  }

  /** Makes the queue's in-progress gauges visible at scrape time; the latest queue of a name wins. */
  registerQueue(queue: WorkQueue): void {
    this.workQueues.register(queue);
  }
}

/** client-go's workqueue metrics, per queue name. */
class WorkQueueMetrics {
  private readonly depth: Gauge<'name'>;
  private readonly adds: Counter<'name'>;
  private readonly retries: Counter<'name'>;
  private readonly queueDuration: Histogram<'name'>;
  private readonly workDuration: Histogram<'name'>;
  private readonly queues = new Map<string, WorkQueue>();

  constructor(registers: Registry[]) {
    this.depth = new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: ['name'],
      registers,
    });
    this.adds = new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name'],
      registers,
    });
    this.retries = new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name'],
      registers,
    });
    this.queueDuration = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets: queueBuckets,
      registers,
    });
    this.workDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name'],
      buckets: queueBuckets,
      registers,
    });
    const queues = this.queues;
    new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration.",
      labelNames: ['name'],
      registers,
      collect() {
        for (const [name, queue] of queues) this.set({ name }, queue.unfinishedWorkSeconds());
      },
    });
    new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames: ['name'],
      registers,
      collect() {
        for (const [name, queue] of queues) this.set({ name }, queue.longestRunningProcessorSeconds());
      },
    });
  }

  hooks(name: string): WorkQueueMetricsHooks {
    const labels = { name };
    return {
      depth: (depth) => this.depth.set(labels, depth),
      added: () => this.adds.inc(labels),
      retried: () => this.retries.inc(labels),
      queueDuration: (seconds) => this.queueDuration.observe(labels, seconds),
      workDuration: (seconds) => this.workDuration.observe(labels, seconds),
    };
  }

  register(queue: WorkQueue): void {
    this.queues.set(queue.name, queue);
  }
}
