"""GradBench's ``lstm`` (from ADBench): the loss of a stacked LSTM with diagonal
weights predicting each character of a sequence from the previous ones, and its
gradient with respect to ``main_params`` and ``extra_params`` by reverse mode.

``main_params`` has two rows per layer: the weights and the biases of the four gates
(forget, input, output, change), each a block of b = bits per character; the forget
and output gates read the layer's input, the input and change gates its hidden state.
``extra_params`` are the input weights, output weights and output biases.  ``state``
holds each layer's initial hidden state and cell.  The loss is the mean over the
sequence of ``-ygold . (ypred - log(2 + sum exp(ypred)))`` (ADBench's normalisation,
with its ``2 +``).
"""
import numpy

import nestad as nd
import nestad.numpy as np

from . import function


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_loss(main_params, extra_params, state, sequence):
    layers = len(main_params) // 2
    b = sequence.shape[1]
    # per layer: (weight, bias) of each gate, split once
    gates = [[(main_params[2 * i, g * b:(g + 1) * b], main_params[2 * i + 1, g * b:(g + 1) * b])
              for g in range(4)] for i in range(layers)]
    in_weight, out_weight, out_bias = extra_params[0], extra_params[1], extra_params[2]
    hidden = [state[2 * i] for i in range(layers)]
    cell = [state[2 * i + 1] for i in range(layers)]
    total = 0.0
    for t in range(len(sequence) - 1):
        layer_input = sequence[t] * in_weight
        for i, ((wf, bf), (wi, bi), (wo, bo), (wc, bc)) in enumerate(gates):
            forget = sigmoid(layer_input * wf + bf)
            ingate = sigmoid(hidden[i] * wi + bi)
            outgate = sigmoid(layer_input * wo + bo)
            change = np.tanh(hidden[i] * wc + bc)
            cell[i] = cell[i] * forget + ingate * change
            hidden[i] = outgate * np.tanh(cell[i])
            layer_input = hidden[i]
        ypred = layer_input * out_weight + out_bias
        ynorm = ypred - np.log(2 + np.sum(np.exp(ypred)))
        total = total + np.sum(sequence[t + 1] * ynorm)
    return -total / ((len(sequence) - 1) * b)


def _prepare(input):
    return tuple(numpy.array(input[name], dtype=float)
                 for name in ('main_params', 'extra_params', 'state', 'sequence'))


@function(prepare=_prepare)
def objective(main_params, extra_params, state, sequence):
    return lstm_loss(main_params, extra_params, state, sequence)


@function(prepare=_prepare,
          output=lambda g: numpy.concatenate([g[0].ravel(), g[1].ravel()]).tolist())
def jacobian(main_params, extra_params, state, sequence):
    return nd.gradient_r(lstm_loss, argnums=(0, 1))(main_params, extra_params, state, sequence)
